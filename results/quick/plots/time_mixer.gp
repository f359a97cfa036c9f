# Made by `trilemma sweep experiments/quick.grid --out runs/quick` and `trilemma report runs/quick`.
# Redraw: cd into this folder and run `gnuplot time_mixer.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'time_mixer.png'
set title "mixer: ms per step vs sequence length"
set xlabel "sequence length T"
set ylabel "ms per training step"
set grid
set key below spacing 1.2 height 1
set logscale x
set logscale y
plot 'time_mixer.dat' index 0 with linespoints lw 2 lc 1 title "attention  T^1.88", \
     'time_mixer.dat' index 1 with lines lw 2 dt 2 lc 1 notitle, \
     'time_mixer.dat' index 2 with linespoints lw 2 lc 2 title "linear  T^1.14", \
     'time_mixer.dat' index 3 with lines lw 2 dt 2 lc 2 notitle, \
     'time_mixer.dat' index 4 with linespoints lw 2 lc 3 title "mamba  T^1.10", \
     'time_mixer.dat' index 5 with lines lw 2 dt 2 lc 3 notitle, \
     'time_mixer.dat' index 6 with linespoints lw 2 lc 4 title "attention window=16  T^1.09", \
     'time_mixer.dat' index 7 with lines lw 2 dt 2 lc 4 notitle
