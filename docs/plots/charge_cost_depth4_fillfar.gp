# Made by tally plot; edit and run again: gnuplot charge_cost_depth4_fillfar.gp
set title "Charge + uncharge cost: depth 4, fill far" noenhanced
set xlabel "threads"
set ylabel "ns per pair"
set key outside right top noenhanced
set grid
set logscale y
set terminal pngcairo size 960,540 noenhanced
set output 'charge_cost_depth4_fillfar.png'
plot  'charge_cost_depth4_fillfar.dat' index 0 with linespoints title "tally", \
     'charge_cost_depth4_fillfar.dat' index 1 with linespoints title "kernel", \
     'charge_cost_depth4_fillfar.dat' index 2 with linespoints title "clickhouse", \
     'charge_cost_depth4_fillfar.dat' index 3 with linespoints title "page_counter"
set terminal svg size 960,540 dynamic noenhanced
set output 'charge_cost_depth4_fillfar.svg'
replot
unset output
