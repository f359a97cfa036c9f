# Made by `trilemma sweep experiments/scaling.grid --out runs/scaling` and `trilemma report runs/scaling`.
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
plot 'acc_vs_seq_len_induction.dat' index 0 with linespoints lw 2 lc 1 title "attention max-seq-len=256", \
     'acc_vs_seq_len_induction.dat' index 1 with linespoints lw 2 lc 2 title "linear max-seq-len=256", \
     'acc_vs_seq_len_induction.dat' index 2 with linespoints lw 2 lc 3 title "mamba max-seq-len=256", \
     'acc_vs_seq_len_induction.dat' index 3 with linespoints lw 2 lc 4 title "attention max-seq-len=512", \
     'acc_vs_seq_len_induction.dat' index 4 with linespoints lw 2 lc 5 title "linear max-seq-len=512", \
     'acc_vs_seq_len_induction.dat' index 5 with linespoints lw 2 lc 6 title "mamba max-seq-len=512", \
     'acc_vs_seq_len_induction.dat' index 6 with linespoints lw 2 lc 7 title "attention max-seq-len=1024", \
     'acc_vs_seq_len_induction.dat' index 7 with linespoints lw 2 lc 8 title "linear max-seq-len=1024", \
     'acc_vs_seq_len_induction.dat' index 8 with linespoints lw 2 lc 9 title "mamba max-seq-len=1024", \
     'acc_vs_seq_len_induction.dat' index 9 with linespoints lw 2 lc 10 title "attention max-seq-len=2048", \
     'acc_vs_seq_len_induction.dat' index 10 with linespoints lw 2 lc 11 title "linear max-seq-len=2048", \
     'acc_vs_seq_len_induction.dat' index 11 with linespoints lw 2 lc 12 title "mamba max-seq-len=2048", \
     'acc_vs_seq_len_induction.dat' index 12 with linespoints lw 2 lc 13 title "attention max-seq-len=4096", \
     'acc_vs_seq_len_induction.dat' index 13 with linespoints lw 2 lc 14 title "linear max-seq-len=4096", \
     'acc_vs_seq_len_induction.dat' index 14 with linespoints lw 2 lc 15 title "mamba max-seq-len=4096", \
     0.015873 with lines dt 2 lc rgb "gray40" title "chance 0.01587"
