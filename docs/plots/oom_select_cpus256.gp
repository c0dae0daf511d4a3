# Made by tally plot; edit and run again: gnuplot oom_select_cpus256.gp
set title "Victim selection time: cpus 256" noenhanced
set xlabel "tasks"
set ylabel "microseconds per selection"
set key outside right top noenhanced
set grid
set logscale x 2
set logscale y
set terminal pngcairo size 960,540 noenhanced
set output 'oom_select_cpus256.png'
plot  'oom_select_cpus256.dat' index 0 with linespoints title "precise", \
     'oom_select_cpus256.dat' index 1 with linespoints title "two_pass"
set terminal svg size 960,540 dynamic noenhanced
set output 'oom_select_cpus256.svg'
replot
unset output
