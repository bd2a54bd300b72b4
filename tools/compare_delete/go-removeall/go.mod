module sweepfs/tools/compare_delete/go-removeall

go 1.21
