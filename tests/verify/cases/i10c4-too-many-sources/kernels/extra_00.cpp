int extra_00 = 0;
