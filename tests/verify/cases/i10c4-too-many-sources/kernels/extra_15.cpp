int extra_15 = 15;
