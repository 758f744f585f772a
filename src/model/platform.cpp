#include "xstage/model/platform.hpp"
