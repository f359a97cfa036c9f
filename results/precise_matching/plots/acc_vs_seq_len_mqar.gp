# Made by `trilemma sweep experiments/precise_matching.grid --out runs/precise_matching --set seed=0` and `trilemma report runs/precise_matching`.
# Redraw: cd into this folder and run `gnuplot acc_vs_seq_len_mqar.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'acc_vs_seq_len_mqar.png'
set title "mqar: token accuracy vs sequence length (best lr, mean over seeds)"
set xlabel "sequence length T"
set ylabel "token accuracy"
set grid
set key below spacing 1.2 height 1
set logscale x
set yrange [0:1.02]
plot 'acc_vs_seq_len_mqar.dat' index 0 with linespoints lw 2 lc 1 title "attention d-model=32 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 1 with linespoints lw 2 lc 2 title "linear d-model=32 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 2 with linespoints lw 2 lc 3 title "mamba d-model=32 dt-rank=2 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 3 with linespoints lw 2 lc 4 title "attention d-model=64 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 4 with linespoints lw 2 lc 5 title "linear d-model=64 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 5 with linespoints lw 2 lc 6 title "mamba d-model=64 dt-rank=4 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 6 with linespoints lw 2 lc 7 title "attention d-model=128 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 7 with linespoints lw 2 lc 8 title "linear d-model=128 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 8 with linespoints lw 2 lc 9 title "mamba d-model=128 dt-rank=8 max-seq-len=64 num-kv-pairs=4", \
     'acc_vs_seq_len_mqar.dat' index 9 with linespoints lw 2 lc 10 title "attention d-model=64 max-seq-len=128 num-kv-pairs=8", \
     'acc_vs_seq_len_mqar.dat' index 10 with linespoints lw 2 lc 11 title "linear d-model=64 max-seq-len=128 num-kv-pairs=8", \
     'acc_vs_seq_len_mqar.dat' index 11 with linespoints lw 2 lc 12 title "mamba d-model=64 dt-rank=4 max-seq-len=128 num-kv-pairs=8", \
     'acc_vs_seq_len_mqar.dat' index 12 with linespoints lw 2 lc 13 title "attention d-model=64 max-seq-len=256 num-kv-pairs=16", \
     'acc_vs_seq_len_mqar.dat' index 13 with linespoints lw 2 lc 14 title "linear d-model=64 max-seq-len=256 num-kv-pairs=16", \
     0.00390625 with lines dt 2 lc rgb "gray40" title "chance 0.003906"
