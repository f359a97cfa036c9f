# Made by `trilemma sweep experiments/escape.grid --out runs/escape` and `trilemma report runs/escape`.
# Redraw: cd into this folder and run `gnuplot time_model.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'time_model.png'
set title "model: ms per step vs sequence length"
set xlabel "sequence length T"
set ylabel "ms per training step"
set grid
set key below spacing 1.2 height 1
set logscale x
set logscale y
plot 'time_model.dat' index 0 with linespoints lw 2 lc 1 title "attention B=2 d=64 L=2  T^1.87", \
     'time_model.dat' index 1 with lines lw 2 dt 2 lc 1 notitle, \
     'time_model.dat' index 2 with linespoints lw 2 lc 2 title "linear B=2 d=64 L=2  T^1.04", \
     'time_model.dat' index 3 with lines lw 2 dt 2 lc 2 notitle, \
     'time_model.dat' index 4 with linespoints lw 2 lc 3 title "mamba B=2 d=64 L=2  T^1.06", \
     'time_model.dat' index 5 with lines lw 2 dt 2 lc 3 notitle, \
     'time_model.dat' index 6 with linespoints lw 2 lc 4 title "attention window=16 B=2 d=64 L=2  T^1.06", \
     'time_model.dat' index 7 with lines lw 2 dt 2 lc 4 notitle, \
     'time_model.dat' index 8 with linespoints lw 2 lc 5 title "mamba+attention B=2 d=64 L=2  T^1.69", \
     'time_model.dat' index 9 with lines lw 2 dt 2 lc 5 notitle, \
     'time_model.dat' index 10 with linespoints lw 2 lc 6 title "mamba+mamba+mamba+attention B=2 d=64 L=4  T^1.51", \
     'time_model.dat' index 11 with lines lw 2 dt 2 lc 6 notitle, \
     'time_model.dat' index 12 with linespoints lw 2 lc 7 title "linear feature-map=taylor feature-dim=16 short-conv=3 B=2 d=64 L=2  T^0.97", \
     'time_model.dat' index 13 with lines lw 2 dt 2 lc 7 notitle, \
     'time_model.dat' index 14 with linespoints lw 2 lc 8 title "linear+attention feature-map=taylor feature-dim=16 short-conv=3 window=16 B=2 d=64 L=2  T^0.97", \
     'time_model.dat' index 15 with lines lw 2 dt 2 lc 8 notitle, \
     'time_model.dat' index 16 with linespoints lw 2 lc 9 title "deltanet B=2 d=64 L=2  T^1.11", \
     'time_model.dat' index 17 with lines lw 2 dt 2 lc 9 notitle, \
     'time_model.dat' index 18 with linespoints lw 2 lc 10 title "gated_deltanet B=2 d=64 L=2  T^1.10", \
     'time_model.dat' index 19 with lines lw 2 dt 2 lc 10 notitle, \
     'time_model.dat' index 20 with linespoints lw 2 lc 11 title "mamba2 B=2 d=64 L=2  T^0.98", \
     'time_model.dat' index 21 with lines lw 2 dt 2 lc 11 notitle, \
     'time_model.dat' index 22 with linespoints lw 2 lc 12 title "mamba2 state-size=16 B=2 d=64 L=2  T^1.04", \
     'time_model.dat' index 23 with lines lw 2 dt 2 lc 12 notitle
