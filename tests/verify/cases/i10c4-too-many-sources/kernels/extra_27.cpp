int extra_27 = 27;
