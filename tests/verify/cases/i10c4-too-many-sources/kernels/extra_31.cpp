int extra_31 = 31;
