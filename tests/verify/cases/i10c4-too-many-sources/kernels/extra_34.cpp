int extra_34 = 34;
