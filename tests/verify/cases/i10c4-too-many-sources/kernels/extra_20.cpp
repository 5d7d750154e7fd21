int extra_20 = 20;
