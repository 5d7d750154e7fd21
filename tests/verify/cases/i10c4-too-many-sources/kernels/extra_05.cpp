int extra_05 = 5;
