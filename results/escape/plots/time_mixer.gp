# Made by `trilemma sweep experiments/escape.grid --out runs/escape` and `trilemma report runs/escape`.
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
plot 'time_mixer.dat' index 0 with linespoints lw 2 lc 1 title "attention  T^1.90", \
     'time_mixer.dat' index 1 with lines lw 2 dt 2 lc 1 notitle, \
     'time_mixer.dat' index 2 with linespoints lw 2 lc 2 title "linear  T^1.15", \
     'time_mixer.dat' index 3 with lines lw 2 dt 2 lc 2 notitle, \
     'time_mixer.dat' index 4 with linespoints lw 2 lc 3 title "mamba  T^1.04", \
     'time_mixer.dat' index 5 with lines lw 2 dt 2 lc 3 notitle, \
     'time_mixer.dat' index 6 with linespoints lw 2 lc 4 title "attention window=16  T^1.04", \
     'time_mixer.dat' index 7 with lines lw 2 dt 2 lc 4 notitle, \
     'time_mixer.dat' index 8 with linespoints lw 2 lc 5 title "linear feature-map=taylor feature-dim=16 short-conv=3  T^1.08", \
     'time_mixer.dat' index 9 with lines lw 2 dt 2 lc 5 notitle, \
     'time_mixer.dat' index 10 with linespoints lw 2 lc 6 title "deltanet  T^1.14", \
     'time_mixer.dat' index 11 with lines lw 2 dt 2 lc 6 notitle, \
     'time_mixer.dat' index 12 with linespoints lw 2 lc 7 title "gated_deltanet  T^1.13", \
     'time_mixer.dat' index 13 with lines lw 2 dt 2 lc 7 notitle, \
     'time_mixer.dat' index 14 with linespoints lw 2 lc 8 title "mamba2  T^1.02", \
     'time_mixer.dat' index 15 with lines lw 2 dt 2 lc 8 notitle, \
     'time_mixer.dat' index 16 with linespoints lw 2 lc 9 title "mamba2 state-size=16  T^1.00", \
     'time_mixer.dat' index 17 with lines lw 2 dt 2 lc 9 notitle
