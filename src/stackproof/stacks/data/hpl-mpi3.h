/* Included before every HPCC source (recipes.yaml: hpcc): HPL 2.x calls two MPI-1 functions that
 * MPI-3 removed and Open MPI 4+ no longer declares; map them to their MPI-2 successors. */
#include <mpi.h>
#undef MPI_Address
#define MPI_Address MPI_Get_address
#undef MPI_Type_struct
#define MPI_Type_struct MPI_Type_create_struct
