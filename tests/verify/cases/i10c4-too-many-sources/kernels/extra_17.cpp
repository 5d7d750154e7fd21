int extra_17 = 17;
