/* The MPI program of verbs_test.sh's case mpi (Open MPI's pml ucx and osc ucx over softrnic):
   two ranks, Sends and Receives (64 B and 64 KiB, every byte checked), then one-sided Puts and
   Gets through a window (fence synchronisation), checked on both ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(const unsigned char* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i)
    if (b[i] != (unsigned char)(seed + i * 7)) return 0;
  return 1;
}
static void fill(unsigned char* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) b[i] = (unsigned char)(seed + i * 7);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_verbs: needs 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int peer = 1 - rank;
  const size_t sizes[2] = {64, 65536};
  unsigned char* buf = malloc(65536);
  int bad = 0;
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < 200; ++i) {
      const unsigned seed = (unsigned)(s * 1000 + i);
      if (rank == 0) {
        fill(buf, sizes[s], seed);
        MPI_Send(buf, (int)sizes[s], MPI_BYTE, peer, i, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)sizes[s], MPI_BYTE, peer, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad += !check(buf, sizes[s], seed + 1);
      } else {
        MPI_Recv(buf, (int)sizes[s], MPI_BYTE, peer, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad += !check(buf, sizes[s], seed);
        fill(buf, sizes[s], seed + 1);
        MPI_Send(buf, (int)sizes[s], MPI_BYTE, peer, i, MPI_COMM_WORLD);
      }
    }
  }
  /* One-sided: each rank puts 64 KiB into the other's window, then gets it back. */
  unsigned char* win_mem = calloc(65536, 1);
  MPI_Win win;
  MPI_Win_create(win_mem, 65536, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  fill(buf, 65536, 77u + (unsigned)rank);
  MPI_Win_fence(0, win);
  MPI_Put(buf, 65536, MPI_BYTE, peer, 0, 65536, MPI_BYTE, win);
  MPI_Win_fence(0, win);
  bad += !check(win_mem, 65536, 77u + (unsigned)peer);
  memset(buf, 0, 65536);
  MPI_Get(buf, 65536, MPI_BYTE, peer, 0, 65536, MPI_BYTE, win);
  MPI_Win_fence(0, win);
  bad += !check(buf, 65536, 77u + (unsigned)rank);
  MPI_Win_free(&win);
  int total = 0;
  MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("mpi_verbs: rank %d: %s (%d bad on this rank)\n", rank, total ? "FAILED" : "ok", bad);
  free(win_mem);
  free(buf);
  MPI_Finalize();
  return total ? 1 : 0;
}
