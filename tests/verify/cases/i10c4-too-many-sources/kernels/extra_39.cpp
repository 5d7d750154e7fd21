int extra_39 = 39;
