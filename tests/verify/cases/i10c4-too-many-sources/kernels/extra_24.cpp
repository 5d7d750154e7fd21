int extra_24 = 24;
