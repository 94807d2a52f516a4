from rest_framework.pagination import CursorPagination, PageNumberPagination


class DefaultPagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class LargeListPagination(CursorPagination):
    """Cursor pagination for lists that run to millions of rows (episodes, cells)."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    ordering = "-id"
