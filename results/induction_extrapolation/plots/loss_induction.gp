# Made by `trilemma sweep experiments/induction_extrapolation.grid --out runs/induction_extrapolation` and `trilemma report runs/induction_extrapolation`.
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
plot 'loss_induction.dat' index 0 with lines lw 2 lc 1 title "attention max-seq-len=4096 pos=learned lr=0.001 seed=0", \
     'loss_induction.dat' index 1 with lines lw 2 lc 2 title "attention max-seq-len=256 pos=rope lr=0.001 seed=0", \
     'loss_induction.dat' index 2 with lines lw 2 lc 3 title "attention max-seq-len=256 pos=alibi lr=0.001 seed=0", \
     'loss_induction.dat' index 3 with lines lw 2 lc 4 title "mamba max-seq-len=256 pos=none lr=0.005 seed=0"
