# Made by tally plot; edit and run again: gnuplot stats_read_percentiles_readers1000_period_ms10.gp
set title "Reader latency percentiles: readers 1000, period_ms 10" noenhanced
set xlabel "percentile"
set ylabel "microseconds"
set key outside right top noenhanced
set grid
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics noenhanced
set terminal pngcairo size 960,540 noenhanced
set output 'stats_read_percentiles_readers1000_period_ms10.png'
plot for [i=2:5] 'stats_read_percentiles_readers1000_period_ms10.dat' using i:xtic(1) title columnheader(i)
set terminal svg size 960,540 dynamic noenhanced
set output 'stats_read_percentiles_readers1000_period_ms10.svg'
replot
unset output
