int extra_03 = 3;
