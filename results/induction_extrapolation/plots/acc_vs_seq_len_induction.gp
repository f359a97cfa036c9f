# Made by `trilemma sweep experiments/induction_extrapolation.grid --out runs/induction_extrapolation` and `trilemma report runs/induction_extrapolation`.
# Redraw: cd into this folder and run `gnuplot acc_vs_seq_len_induction.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'acc_vs_seq_len_induction.png'
set title "induction: token accuracy vs sequence length (best lr, mean over seeds)"
set xlabel "sequence length T"
set ylabel "token accuracy"
set grid
set key below spacing 1.2 height 1
set logscale x
set yrange [0:1.02]
plot 'acc_vs_seq_len_induction.dat' index 0 with linespoints lw 2 lc 1 title "attention max-seq-len=4096 pos=learned lr=0.001", \
     'acc_vs_seq_len_induction.dat' index 1 with linespoints lw 2 lc 2 title "attention max-seq-len=256 pos=rope lr=0.001", \
     'acc_vs_seq_len_induction.dat' index 2 with linespoints lw 2 lc 3 title "attention max-seq-len=256 pos=alibi lr=0.001", \
     'acc_vs_seq_len_induction.dat' index 3 with linespoints lw 2 lc 4 title "mamba max-seq-len=256 pos=none lr=0.005", \
     0.0666667 with lines dt 2 lc rgb "gray40" title "chance 0.06667"
