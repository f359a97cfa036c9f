# Made by `trilemma sweep experiments/copy_length.grid --out runs/copy_length` and `trilemma report runs/copy_length`.
# Redraw: cd into this folder and run `gnuplot acc_vs_seq_len_copy.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'acc_vs_seq_len_copy.png'
set title "copy: token accuracy vs sequence length (best lr, mean over seeds)"
set xlabel "sequence length T"
set ylabel "token accuracy"
set grid
set key below spacing 1.2 height 1
set logscale x
set yrange [0:1.02]
plot 'acc_vs_seq_len_copy.dat' index 0 with linespoints lw 2 lc 1 title "attention pos=rope lr=0.001", \
     'acc_vs_seq_len_copy.dat' index 1 with linespoints lw 2 lc 2 title "attention pos=alibi lr=0.001", \
     'acc_vs_seq_len_copy.dat' index 2 with linespoints lw 2 lc 3 title "attention pos=none lr=0.001", \
     'acc_vs_seq_len_copy.dat' index 3 with linespoints lw 2 lc 4 title "linear pos=rope lr=0.001", \
     'acc_vs_seq_len_copy.dat' index 4 with linespoints lw 2 lc 5 title "mamba pos=none lr=0.003", \
     0.0384615 with lines dt 2 lc rgb "gray40" title "chance 0.03846"
