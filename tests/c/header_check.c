/* comm.h is plain C11 and also valid C++: the c_header_* tests compile this
 * file as C11 and as C++11/C++20 with -Wall -Wextra -pedantic -Werror, using
 * every macro the header defines. */
#include <comm/comm.h>

#ifdef __cplusplus
#define CHECK_STATIC static_assert
#else
#define CHECK_STATIC _Static_assert
#endif

CHECK_STATIC(COMM_OK == 0, "COMM_OK is 0");
CHECK_STATIC(COMM_ERR_INTERNAL == 13, "status codes are fixed");
CHECK_STATIC(COMM_ABI_VERSION_MAJOR >= 1, "ABI major");

int comm_header_check(void);
int comm_header_check(void) {
  comm_call_options_t o = COMM_CALL_OPTIONS_INIT;
  comm_t* c = NULL;
  comm_request_t* r = NULL;
  comm_config_t* cfg = NULL;
  (void)c;
  (void)r;
  (void)cfg;
  return (int)o.struct_size + (int)COMM_ABI_VERSION_MINOR + (int)COMM_BF16 + (int)COMM_AVG + (int)COMM_MEMORY_CUDA +
         (int)COMM_COLL_RECV;
}
