# Made by `trilemma sweep experiments/scaling.grid --out runs/scaling` and `trilemma report runs/scaling`.
# Redraw: cd into this folder and run `gnuplot loss_induction.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'loss_induction.png'
set title "induction: train loss (best lr, lowest seed)"
set xlabel "step"
set ylabel "train loss"
set grid
set key below spacing 1.2 height 1
set logscale y
plot 'loss_induction.dat' index 0 with lines lw 2 lc 1 title "attention max-seq-len=256 seq-len=256 lr=0.001 seed=0", \
     'loss_induction.dat' index 1 with lines lw 2 lc 2 title "linear max-seq-len=256 seq-len=256 lr=0.001 seed=0", \
     'loss_induction.dat' index 2 with lines lw 2 lc 3 title "mamba max-seq-len=256 seq-len=256 lr=0.001 seed=0", \
     'loss_induction.dat' index 3 with lines lw 2 lc 4 title "attention max-seq-len=512 seq-len=512 lr=0.001 seed=0", \
     'loss_induction.dat' index 4 with lines lw 2 lc 5 title "linear max-seq-len=512 seq-len=512 lr=0.001 seed=0", \
     'loss_induction.dat' index 5 with lines lw 2 lc 6 title "mamba max-seq-len=512 seq-len=512 lr=0.001 seed=0", \
     'loss_induction.dat' index 6 with lines lw 2 lc 7 title "attention max-seq-len=1024 seq-len=1024 lr=0.001 seed=0", \
     'loss_induction.dat' index 7 with lines lw 2 lc 8 title "linear max-seq-len=1024 seq-len=1024 lr=0.001 seed=0", \
     'loss_induction.dat' index 8 with lines lw 2 lc 9 title "mamba max-seq-len=1024 seq-len=1024 lr=0.001 seed=0", \
     'loss_induction.dat' index 9 with lines lw 2 lc 10 title "attention max-seq-len=2048 seq-len=2048 lr=0.001 seed=0", \
     'loss_induction.dat' index 10 with lines lw 2 lc 11 title "linear max-seq-len=2048 seq-len=2048 lr=0.001 seed=0", \
     'loss_induction.dat' index 11 with lines lw 2 lc 12 title "mamba max-seq-len=2048 seq-len=2048 lr=0.001 seed=0", \
     'loss_induction.dat' index 12 with lines lw 2 lc 13 title "attention max-seq-len=4096 seq-len=4096 lr=0.001 seed=0", \
     'loss_induction.dat' index 13 with lines lw 2 lc 14 title "linear max-seq-len=4096 seq-len=4096 lr=0.001 seed=0", \
     'loss_induction.dat' index 14 with lines lw 2 lc 15 title "mamba max-seq-len=4096 seq-len=4096 lr=0.001 seed=0"
