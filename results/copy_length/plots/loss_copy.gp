# Made by `trilemma sweep experiments/copy_length.grid --out runs/copy_length` and `trilemma report runs/copy_length`.
# Redraw: cd into this folder and run `gnuplot loss_copy.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'loss_copy.png'
set title "copy: train loss (best lr, lowest seed)"
set xlabel "step"
set ylabel "train loss"
set grid
set key below spacing 1.2 height 1
set logscale y
plot 'loss_copy.dat' index 0 with lines lw 2 lc 1 title "attention pos=rope lr=0.001 seed=0", \
     'loss_copy.dat' index 1 with lines lw 2 lc 2 title "attention pos=alibi lr=0.001 seed=0", \
     'loss_copy.dat' index 2 with lines lw 2 lc 3 title "attention pos=none lr=0.001 seed=0", \
     'loss_copy.dat' index 3 with lines lw 2 lc 4 title "linear pos=rope lr=0.001 seed=0", \
     'loss_copy.dat' index 4 with lines lw 2 lc 5 title "mamba pos=none lr=0.003 seed=0"
