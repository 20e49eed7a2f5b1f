"""Reads finished results only and turns them into tables, plots and pages. Never imports training code."""
