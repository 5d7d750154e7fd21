int extra_14 = 14;
