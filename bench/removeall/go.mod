module sweepfs/bench/removeall

go 1.21
