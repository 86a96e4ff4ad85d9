/* OpenMP: print how many threads the parallel region got. */
#include <omp.h>
#include <stdio.h>

int main(void)
{
    int n = 0;
#pragma omp parallel
#pragma omp single
    n = omp_get_num_threads();
    printf("threads: %d\n", n);
    return 0;
}
