# Made by tally plot; edit and run again: gnuplot counter_add.gp
set title "Counter add cost per thread" noenhanced
set xlabel "threads"
set ylabel "ns per add"
set key outside right top noenhanced
set grid
set logscale x 2
set logscale y
set terminal pngcairo size 960,540 noenhanced
set output 'counter_add.png'
plot  'counter_add.dat' index 0 with linespoints title "tally", \
     'counter_add.dat' index 1 with linespoints title "shared_atomic", \
     'counter_add.dat' index 2 with linespoints title "percpu_counter", \
     'counter_add.dat' index 3 with linespoints title "percpu_atomic", \
     'counter_add.dat' index 4 with linespoints title "striped_cells", \
     'counter_add.dat' index 5 with linespoints title "thread_cached", \
     'counter_add.dat' index 6 with linespoints title "rseq_add", \
     'counter_add.dat' index 7 with linespoints title "tls_increment"
set terminal svg size 960,540 dynamic noenhanced
set output 'counter_add.svg'
replot
unset output
