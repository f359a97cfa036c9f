# Made by `trilemma sweep experiments/based_pieces.grid --out runs/based_pieces` and `trilemma report runs/based_pieces`.
# Redraw: cd into this folder and run `gnuplot loss_mqar.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'loss_mqar.png'
set title "mqar: train loss (best lr, lowest seed)"
set xlabel "step"
set ylabel "train loss"
set grid
set key below spacing 1.2 height 1
set logscale y
plot 'loss_mqar.dat' index 0 with lines lw 2 lc 1 title "linear feature-map=taylor feature-dim=16 short-conv=3 lr=0.003 seed=0", \
     'loss_mqar.dat' index 1 with lines lw 2 lc 2 title "linear short-conv=3 lr=0.003 seed=0", \
     'loss_mqar.dat' index 2 with lines lw 2 lc 3 title "linear feature-map=taylor feature-dim=16 lr=0.003 seed=0"
