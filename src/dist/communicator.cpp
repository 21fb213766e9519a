#include "dist/communicator.h"

namespace dsv4::dist {

size_t comm_dtype_bytes(CommDtype dtype) {
    switch (dtype) {
        case CommDtype::kF32:
        case CommDtype::kI32:
            return 4;
        case CommDtype::kI64:
            return 8;
        case CommDtype::kU8:
            return 1;
    }
    return 1;
}

}  // namespace dsv4::dist
