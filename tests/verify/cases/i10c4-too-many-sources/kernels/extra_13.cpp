int extra_13 = 13;
