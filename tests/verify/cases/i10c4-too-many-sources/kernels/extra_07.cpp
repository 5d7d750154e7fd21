int extra_07 = 7;
