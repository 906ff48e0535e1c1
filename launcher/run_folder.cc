#include "launcher/run_folder.h"

#include <filesystem>

#include "common/text_file.h"

namespace tencache {

namespace fs = std::filesystem;

std::string RunFolder::Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

Status RunFolder::Create() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Status::IoError(dir_ + ": cannot create the run folder: " + ec.message());
  return Status::Ok();
}

Status RunFolder::Write(const std::string& name, const std::string& text) const {
  return WriteFileAtomically(Path(name), text);
}

}  // namespace tencache
