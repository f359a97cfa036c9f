# Made by `trilemma sweep experiments/escape.grid --out runs/escape` and `trilemma report runs/escape`.
# Redraw: cd into this folder and run `gnuplot capacity_per_kb_mqar.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'capacity_per_kb_mqar.png'
set title "mqar: accuracy vs pairs per kB of state"
set xlabel "pairs per kB of state (K / state kB)"
set ylabel "test token accuracy"
set grid
set key below spacing 1.2 height 1
set logscale x
set yrange [0:1.05]
plot 'capacity_per_kb_mqar.dat' index 0 with yerrorlines lw 2 lc 1 title "attention", \
     'capacity_per_kb_mqar.dat' index 1 with yerrorlines lw 2 lc 2 title "attention window=16", \
     'capacity_per_kb_mqar.dat' index 2 with yerrorlines lw 2 lc 3 title "linear", \
     'capacity_per_kb_mqar.dat' index 3 with yerrorlines lw 2 lc 4 title "mamba", \
     'capacity_per_kb_mqar.dat' index 4 with yerrorlines lw 2 lc 5 title "mamba+attention", \
     'capacity_per_kb_mqar.dat' index 5 with yerrorlines lw 2 lc 6 title "mamba+mamba+mamba+attention", \
     'capacity_per_kb_mqar.dat' index 6 with yerrorlines lw 2 lc 7 title "linear feature-map=taylor feature-dim=16 short-conv=3", \
     'capacity_per_kb_mqar.dat' index 7 with yerrorlines lw 2 lc 8 title "linear+attention feature-map=taylor feature-dim=16 short-conv=3 window=16", \
     'capacity_per_kb_mqar.dat' index 8 with yerrorlines lw 2 lc 9 title "deltanet", \
     'capacity_per_kb_mqar.dat' index 9 with yerrorlines lw 2 lc 10 title "gated_deltanet", \
     'capacity_per_kb_mqar.dat' index 10 with yerrorlines lw 2 lc 11 title "mamba2", \
     'capacity_per_kb_mqar.dat' index 11 with yerrorlines lw 2 lc 12 title "mamba2 state-size=16", \
     0.9 with lines dt 2 lc rgb "gray40" title "capacity threshold 0.9"
