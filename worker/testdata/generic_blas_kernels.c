/* Test shim (LD_PRELOAD): OpenBLAS reports its generic Prescott kernels, as
 * it does on a virtual machine that hides the CPU model, unless
 * OPENBLAS_CORETYPE chose others. See worker/blas_restart_test.sh. */
#include <stdlib.h>

char* openblas_get_corename(void) {
  const char* chosen = getenv("OPENBLAS_CORETYPE");
  return chosen != NULL ? (char*)chosen : (char*)"Prescott";
}
