# Made by `trilemma sweep experiments/quick.grid --out runs/quick` and `trilemma report runs/quick`.
# Redraw: cd into this folder and run `gnuplot time_decode.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'time_decode.png'
set title "decode: ms per token vs sequence length"
set xlabel "sequence length T"
set ylabel "ms per generated token"
set grid
set key below spacing 1.2 height 1
set logscale x
set logscale y
plot 'time_decode.dat' index 0 with linespoints lw 2 lc 1 title "attention  T^1.37", \
     'time_decode.dat' index 1 with lines lw 2 dt 2 lc 1 notitle, \
     'time_decode.dat' index 2 with linespoints lw 2 lc 2 title "linear  T^-0.09", \
     'time_decode.dat' index 3 with lines lw 2 dt 2 lc 2 notitle, \
     'time_decode.dat' index 4 with linespoints lw 2 lc 3 title "mamba  T^-0.01", \
     'time_decode.dat' index 5 with lines lw 2 dt 2 lc 3 notitle, \
     'time_decode.dat' index 6 with linespoints lw 2 lc 4 title "attention window=16  T^-0.00", \
     'time_decode.dat' index 7 with lines lw 2 dt 2 lc 4 notitle
