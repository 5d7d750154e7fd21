int extra_12 = 12;
