#pragma once
/// \file comm.hpp
/// Umbrella header: everything a user of comm needs.

#include <comm/buffer.hpp>
#include <comm/communicator.hpp>
#include <comm/config.hpp>
#include <comm/error.hpp>
#include <comm/model.hpp>
#include <comm/schedule.hpp>
#include <comm/store.hpp>
#include <comm/transport.hpp>
#include <comm/types.hpp>
#include <comm/version.hpp>
