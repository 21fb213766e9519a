// SafetensorsFile: the memory-mapped, zero-copy side of the safetensors reader. See safetensors.h.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "loader/safetensors.h"
#include "loader/text_util.h"
#include "loader/unique_fd.h"

namespace dsv4 {
namespace {

// The page-aligned range covering a view's bytes, for madvise.
std::pair<uintptr_t, size_t> page_range(const TensorView& view) {
    static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    auto begin = reinterpret_cast<uintptr_t>(view.data) & ~(page - 1);
    auto end = reinterpret_cast<uintptr_t>(view.data) + view.nbytes;
    return {begin, end - begin};
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
    SafetensorsFile file;
    file.path_ = path;
    const std::string name = path.filename().string();
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) fail("{}: cannot stat: {}", path.string(), std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path.string());
    file.size_ = static_cast<uint64_t>(st.st_size);
    if (file.size_ > 0) {
        void* base = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
        if (base == MAP_FAILED)
            fail("{}: mmap of {} bytes failed: {}", path.string(), file.size_, std::strerror(errno));
        file.base_ = static_cast<const uint8_t*>(base);  // owned from here on: the destructor unmaps
    }
    SafetensorsImage image = parse_safetensors_image({file.base_, file.size_}, name);
    file.data_start_ = image.data_start;
    file.header_ = std::move(image.header);
    file.views_.reserve(file.header_.tensors.size());
    for (const auto& info : file.header_.tensors) {
        file.views_.push_back(TensorView{file.base_ + file.data_start_ + info.offset, info.dtype,
                                         std::span<const int64_t>(info.shape), info.nbytes});
    }
    return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      data_start_(other.data_start_),
      header_(std::move(other.header_)),
      views_(std::move(other.views_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
    if (this != &other) {
        unmap();
        path_ = std::move(other.path_);
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        data_start_ = other.data_start_;
        header_ = std::move(other.header_);
        views_ = std::move(other.views_);
    }
    return *this;
}

SafetensorsFile::~SafetensorsFile() {
    unmap();
}

void SafetensorsFile::unmap() noexcept {
    if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
    base_ = nullptr;
    size_ = 0;
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
    const SafetensorsTensorInfo* info = header_.find(name);
    return info == nullptr ? nullptr : &views_[static_cast<size_t>(info - header_.tensors.data())];
}

const TensorView& SafetensorsFile::at(std::string_view name) const {
    const TensorView* view = find(name);
    if (view == nullptr) fail("{}: no tensor {}", file_name(), quote_name(name));
    return *view;
}

void SafetensorsFile::check_owned(const TensorView& view) const {
    if (view.nbytes == 0) return;
    DSV4_CHECK(view.data >= base_ && view.data + view.nbytes <= base_ + size_,
               "{}: paging hint for a tensor view that is not inside this file", file_name());
}

void SafetensorsFile::prefetch(const TensorView& view) const {
    check_owned(view);
    if (view.nbytes == 0) return;
    auto [begin, length] = page_range(view);
    ::madvise(reinterpret_cast<void*>(begin), length, MADV_WILLNEED);  // a hint: failure is harmless
}

void SafetensorsFile::release(const TensorView& view) const {
    check_owned(view);  // MADV_DONTNEED on memory that is not a read-only file mapping would discard data
    if (view.nbytes == 0) return;
    auto [begin, length] = page_range(view);
    ::madvise(reinterpret_cast<void*>(begin), length, MADV_DONTNEED);
}

}  // namespace dsv4
