int extra_33 = 33;
