int extra_25 = 25;
