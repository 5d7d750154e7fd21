int extra_09 = 9;
