# sweepfs compare-delete: files removed per second by tree size.
# Made from bench/results/compare-delete-flat-sweep-20261121-1911.json; run it with gnuplot.
set terminal svg size 960,600 dynamic enhanced font 'sans,11' background rgb 'white'
set output 'bench/results/compare-delete-flat-sweep-20261121-1911.svg'
set title "flat tree: files removed per second (rmr, snapshot: until purged)"
set logscale xy
set grid
set key outside right
set xlabel 'files in the tree'
set ylabel 'files per second'
$d0_0 << EOD
10000 12179.7
100000 5438.02
1000000 6987.92
EOD
$d0_1 << EOD
10000 12291.2
100000 5731.65
1000000 9771.31
EOD
$d0_2 << EOD
10000 12040.2
100000 6490.83
1000000 8404.82
EOD
$d0_3 << EOD
10000 14626.2
100000 10025.1
1000000 11917.2
EOD
$d0_4 << EOD
10000 484701
100000 547014
1000000 547434
EOD
$d0_5 << EOD
10000 467827
100000 682715
1000000 521673
EOD
$d1_0 << EOD
10000 108681
100000 49083.9
1000000 90634.9
EOD
$d1_1 << EOD
10000 85263.9
100000 92504.2
1000000 73465.7
EOD
$d1_2 << EOD
10000 82165.6
100000 69152.2
1000000 86896.2
EOD
$d1_3 << EOD
10000 74525.6
100000 88332.9
1000000 101216
EOD
plot \
  $d0_0 using 1:2 with linespoints dashtype 1 title 'rm-rf (sweepfs)', \
  $d0_1 using 1:2 with linespoints dashtype 1 title 'removeall (sweepfs)', \
  $d0_2 using 1:2 with linespoints dashtype 1 title 'go-removeall (sweepfs)', \
  $d0_3 using 1:2 with linespoints dashtype 1 title 'sweepfs-rm (sweepfs)', \
  $d0_4 using 1:2 with linespoints dashtype 1 title 'rmr (sweepfs)', \
  $d0_5 using 1:2 with linespoints dashtype 1 title 'snapshot (sweepfs)', \
  $d1_0 using 1:2 with linespoints dashtype 2 title 'rm-rf (ext4)', \
  $d1_1 using 1:2 with linespoints dashtype 2 title 'removeall (ext4)', \
  $d1_2 using 1:2 with linespoints dashtype 2 title 'go-removeall (ext4)', \
  $d1_3 using 1:2 with linespoints dashtype 2 title 'sweepfs-rm (ext4)'
