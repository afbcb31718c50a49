// .npz archives (include/ingot/trainer/npy.h): zip archives of .npy members, read and written
// with libzip (https://libzip.org; PKWARE's APPNOTE.TXT is the format), as numpy.savez /
// numpy.savez_compressed / numpy.load do.
#include <zip.h>

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/trainer/npy.h"
#include "ingot/trainer/output_file.h"
#include "npy_format.h"

namespace ingot {

namespace {

constexpr std::string_view kSuffix = ".npy";

std::string zip_reason(zip_error_t* error) { return zip_error_strerror(error); }

/// An open archive (zip_discard on destruction).
struct Archive {
  zip_t* zip = nullptr;
  ~Archive() {
    if (zip != nullptr) zip_discard(zip);
  }
};

/// An open member (zip_fclose on destruction).
struct Member {
  zip_file_t* file = nullptr;
  ~Member() {
    if (file != nullptr) zip_fclose(file);
  }
};

[[noreturn]] void bad_archive(const std::string& path, const std::string& message,
                              ErrorCode code = ErrorCode::kParseError) {
  throw Error(code, fmt::format("load_npz('{}'): {}", path, message),
              code == ErrorCode::kParseError ? "the file is truncated or corrupt, or not an .npz archive (numpy.savez "
                                               "writes them)"
                                             : "re-save the archive with numpy.savez or numpy.savez_compressed");
}

/// The bytes of member `index` (`stat` its zip_stat), checked against its CRC-32 by libzip.
std::vector<std::byte> read_member(zip_t* zip, zip_uint64_t index, const zip_stat_t& stat, const std::string& path) {
  const std::string name = stat.name;
  if ((stat.valid & ZIP_STAT_ENCRYPTION_METHOD) != 0 && stat.encryption_method != ZIP_EM_NONE) {
    bad_archive(path, fmt::format("member '{}' is encrypted", name), ErrorCode::kUnimplemented);
  }
  if ((stat.valid & ZIP_STAT_COMP_METHOD) != 0 && stat.comp_method != ZIP_CM_STORE &&
      stat.comp_method != ZIP_CM_DEFLATE) {
    bad_archive(path,
                fmt::format("member '{}' uses compression method {}; only stored (0) and deflate (8) are supported",
                            name, stat.comp_method),
                ErrorCode::kUnimplemented);
  }
  // Deflate expands at most ~1032:1 (RFC 1951's longest match per 2-bit code), stored members not
  // at all: a larger declared size is a corrupt or hostile header, refused before allocating it.
  if ((stat.valid & ZIP_STAT_COMP_SIZE) != 0) {
    const zip_uint64_t limit = stat.comp_method == ZIP_CM_STORE ? stat.comp_size : stat.comp_size * 1032 + 1024;
    if (stat.size > limit) {
      bad_archive(path, fmt::format("member '{}' declares {} bytes from {} compressed bytes, more than its method "
                                    "can hold",
                                    name, stat.size, stat.comp_size));
    }
  }
  Member member;
  member.file = zip_fopen_index(zip, index, 0);
  if (member.file == nullptr) {
    bad_archive(path, fmt::format("member '{}' cannot be opened: {}", name, zip_reason(zip_get_error(zip))));
  }
  std::vector<std::byte> bytes(static_cast<size_t>(stat.size));
  zip_uint64_t done = 0;
  while (done < stat.size) {
    const zip_int64_t n = zip_fread(member.file, bytes.data() + done, stat.size - done);
    if (n < 0) {
      bad_archive(path, fmt::format("member '{}' cannot be read at byte {} of {}: {}", name, done, stat.size,
                                    zip_reason(zip_file_get_error(member.file))));
    }
    if (n == 0) {
      bad_archive(path, fmt::format("member '{}' ends after {} of its {} bytes", name, done, stat.size));
    }
    done += static_cast<zip_uint64_t>(n);
  }
  char extra = 0;  // reading past the end makes libzip check the CRC-32 of a stored member too
  if (zip_fread(member.file, &extra, 1) != 0) {
    bad_archive(path, fmt::format("member '{}' is longer than its declared {} bytes, or its CRC-32 does not match: {}",
                                  name, stat.size, zip_reason(zip_file_get_error(member.file))));
  }
  return bytes;
}

NpzFile read_archive(const std::string& path) {
  const detail::MappedFile file(path, "load_npz");
  const auto bytes = file.bytes();
  if (bytes.empty()) bad_archive(path, "the file is empty");
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  if (source == nullptr) bad_archive(path, zip_reason(&error), ErrorCode::kOutOfMemory);
  Archive archive;
  archive.zip = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
  if (archive.zip == nullptr) {
    zip_source_free(source);
    const std::string reason = zip_reason(&error);
    zip_error_fini(&error);
    bad_archive(path, "not a valid zip archive: " + reason);
  }
  std::vector<std::pair<std::string, Array>> arrays;
  std::set<std::string> seen;
  const zip_int64_t count = zip_get_num_entries(archive.zip, 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t stat;
    zip_stat_init(&stat);
    if (zip_stat_index(archive.zip, static_cast<zip_uint64_t>(i), 0, &stat) != 0 || (stat.valid & ZIP_STAT_NAME) == 0 ||
        (stat.valid & ZIP_STAT_SIZE) == 0) {
      bad_archive(path, fmt::format("member {} cannot be inspected: {}", i, zip_reason(zip_get_error(archive.zip))));
    }
    const std::string name = stat.name;
    if (!name.empty() && name.back() == '/') bad_archive(path, fmt::format("member '{}' is a directory", name));
    if (name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) {
      throw Error(ErrorCode::kParseError,
                  fmt::format("load_npz('{}'): member '{}' is not an array (its name does not end in '.npy')", path,
                              detail::quote_bytes(name)),
                  "ingot loads only the arrays of an .npz (numpy.savez writes every array as '<name>.npy')");
    }
    const std::string array_name = name.substr(0, name.size() - kSuffix.size());
    if (!seen.insert(array_name).second) bad_archive(path, fmt::format("member '{}' appears twice", name));
    const std::vector<std::byte> data = read_member(archive.zip, static_cast<zip_uint64_t>(i), stat, path);
    arrays.emplace_back(array_name, parse_npy(data, fmt::format("'{}' member '{}'", path, name)));
  }
  return NpzFile(path, std::move(arrays));
}

/// The bytes of an archive holding `members` ({name, bytes}), built in memory by libzip.
std::string build_archive(const std::vector<std::pair<std::string, std::string>>& members, bool compress,
                          const std::string& path) {
  auto fail = [&](const std::string& what, zip_error_t* error) {
    return Error(ErrorCode::kInternal, fmt::format("save_npz('{}'): {}: {}", path, what, zip_reason(error)));
  };
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (buffer == nullptr) throw fail("creating the archive", &error);
  zip_source_keep(buffer);  // it outlives the archive: its contents are read after zip_close
  struct Release {
    zip_source_t* s;
    ~Release() { zip_source_free(s); }
  } release{buffer};
  Archive archive;
  archive.zip = zip_open_from_source(buffer, ZIP_TRUNCATE, &error);
  if (archive.zip == nullptr) {
    zip_source_free(buffer);  // the reference zip_open_from_source did not take
    throw fail("opening the archive", &error);
  }
  for (const auto& [name, bytes] : members) {
    zip_source_t* s = zip_source_buffer(archive.zip, bytes.data(), bytes.size(), 0);
    const zip_int64_t index = s == nullptr ? -1 : zip_file_add(archive.zip, name.c_str(), s, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      if (s != nullptr) zip_source_free(s);
      throw fail("adding '" + name + "'", zip_get_error(archive.zip));
    }
    if (zip_set_file_compression(archive.zip, static_cast<zip_uint64_t>(index),
                                 compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0) {
      throw fail("setting the compression of '" + name + "'", zip_get_error(archive.zip));
    }
  }
  if (zip_close(archive.zip) != 0) throw fail("writing the archive", zip_get_error(archive.zip));
  archive.zip = nullptr;
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_source_stat(buffer, &stat) != 0 || zip_source_open(buffer) != 0) {
    throw fail("reading the archive back", zip_source_error(buffer));
  }
  std::string out(static_cast<size_t>(stat.size), '\0');
  const zip_int64_t n = zip_source_read(buffer, out.data(), out.size());
  zip_source_close(buffer);
  if (n != static_cast<zip_int64_t>(out.size())) throw fail("reading the archive back", zip_source_error(buffer));
  return out;
}

}  // namespace

std::vector<std::string> NpzFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, array] : arrays_) out.push_back(name);
  return out;
}

const Array* NpzFile::find(const std::string& name) const {
  for (const auto& [n, array] : arrays_) {
    if (n == name) return &array;
  }
  return nullptr;
}

const Array& NpzFile::at(const std::string& name) const {
  if (const Array* a = find(name)) return *a;
  std::string names;
  for (const auto& [n, array] : arrays_) names += (names.empty() ? "'" : ", '") + n + "'";
  throw Error(ErrorCode::kNotFound, fmt::format("'{}' holds no array '{}'", path_, name),
              names.empty() ? "the archive holds no arrays" : "it holds " + names);
}

NpzFile load_npz(const std::string& path) {
  return detail::guard_std_exceptions("load_npz('" + path + "')", [&] { return read_archive(path); });
}

void save_npz(const std::string& path, const std::vector<std::pair<std::string, Array>>& arrays, bool compress) {
  detail::guard_std_exceptions("save_npz('" + path + "')", [&] {
    std::vector<std::pair<std::string, std::string>> members;
    std::set<std::string> seen;
    for (const auto& [name, array] : arrays) {
      if (name.empty() || !seen.insert(name).second) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("save_npz('{}'): {}", path,
                                name.empty() ? "an array has an empty name" : "the name '" + name + "' is used twice"),
                    "give every array its own non-empty name (np.load returns them by name)");
      }
      const std::string context = fmt::format("save_npz('{}') array '{}'", path, name);
      const Array host = detail::npy_host_array(array, context.c_str());
      std::string bytes = detail::encode_npy_header(host, context);
      detail::encode_npy_data(host, [&](const void* p, int64_t n) { bytes.append(static_cast<const char*>(p), n); });
      members.emplace_back(name + std::string(kSuffix), std::move(bytes));
    }
    write_output_file(path, build_archive(members, compress, path), "save_npz");
  });
}

}  // namespace ingot
