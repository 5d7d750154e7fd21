int extra_10 = 10;
