#pragma once
/// \file export.hpp
/// Symbol visibility. The library is built with hidden visibility; every public
/// entity carries COMM_API so that only the documented API is exported.

#if defined(COMM_STATIC_DEFINE)
#define COMM_API
#elif defined(_WIN32)
#if defined(COMM_BUILDING)
#define COMM_API __declspec(dllexport)
#else
#define COMM_API __declspec(dllimport)
#endif
#else
#define COMM_API __attribute__((visibility("default")))
#endif
